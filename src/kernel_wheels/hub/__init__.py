"""The Hugging Face Hub (or a Hub-compatible server), as every command asks it.

- :mod:`.session`: huggingface_hub's HTTP client configured (our timeout, the minimum
  rate, one layer of retries, the token only for the endpoint's origin);
- :mod:`.failures`: what an exception from a Hub call means (the one error mapping);
- :mod:`.client`: the endpoint, the one retry loop and its error lines, listing pages;
- :mod:`.repository`: one repository's refs, commits, tree listings and downloads;
- :mod:`.answers`: the Hub's answers held to their shapes; :mod:`.files`: files
  downloaded into the HF cache, checked against the listing;
- :mod:`.listing`: an organisation's repositories, a repository's releases.

The wing knows nothing of conversions: ``sources.hub`` is a kernel source over it, and
``serve``, ``mirror`` and ``locked`` ask it their listings.
"""
