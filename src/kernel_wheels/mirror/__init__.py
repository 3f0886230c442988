"""``kernel-wheels mirror``: keep a static index (a folder or an S3-compatible bucket) in
sync with every release of a set of Hub kernels, incrementally, crash-safely, and split
over any batch engine (``--shard K/N``).

- ``listing``: which repositories, releases and variants exist (the Hub, or a kernels.lock);
- ``plan``: what one run (or one shard) does, a pure function of the listing and the state;
- ``store``: where the index lives (:class:`~.store.Destination`: a folder, a bucket);
- ``uploads``: where the wheels go (the store's ``files/``, or an index server through
  ``remote.publish``, the store then keeping only the state);
- ``lease``: one finishing run at a time (a lease object, written with a conditional put,
  taken over from a dead holder by one run only);
- ``state``: what was converted from which commit, with which sha256 (in the destination);
- ``owners``: which repository gives each project, decided before anything is written;
- ``pipeline``: convert the planned items and upload wheel objects, then their records;
- ``finish``: fold the records into the state and write the pages, after every object;
- ``progress``: the events a run reports (the CLI renders them).

It sits on a floor of its own above ``serve`` and ``locked`` (it reads a lock through
``locked``, converts through ``convert`` and renders pages through ``distribution``).
"""
