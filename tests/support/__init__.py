"""What the tests share, and the benchmarks too: servers on 127.0.0.1 (olah as the Hub,
hostile Hubs and index servers, pypiserver and devpi, ``serve``), fault-injecting proxies,
hostile clients, the ELF mutation engine, the wheel contract's rows and the helpers that
run the CLI as a user would. Imported as ``support`` by the tests (pytest puts ``tests/``
on the path) and as ``tests.support`` by the benchmarks (run from the project's root), so
the modules import each other relatively."""
