"""The static index site: a folder that any web server or object store serves as is.

- ``build``: adding wheels to a site, and yanking (incremental, atomic, locked);
- ``pages``: which project pages to render, and writing them;
- ``state``: the site's cache between runs;
- ``variants``: the variant wheels' ``-variants.json`` files (PEP 825 draft);
- ``yanks``: yanked releases (PEP 592);
- ``atomic``: renames from a staging folder, and the site lock.
"""
