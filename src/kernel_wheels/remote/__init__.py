"""Package index servers over HTTP, treated as hostile (pypiserver, devpi, Artifactory, ...).

- ``transport``: HTTP with index servers (credentials for their own origin only, a minimum
  transfer rate, bounded answers); every server text goes through
  ``kernel_wheels.redaction`` before it is shown;
- ``simple_client``: reading a remote index's Simple API;
- ``find_links``: pip's ``--find-links`` (a folder of wheels, or a page of links);
- ``index_settings``: where ``install`` looks, as pip and uv users already said it;
- ``credentials`` and ``publish``: uploading to an index server.
"""
