"""A kernel release -> checked wheels in an output folder (``kernel-wheels to-wheel``).

- ``pipeline``: the core, read top to bottom (:func:`~.pipeline.to_wheels`): resolve the
  revision, select variants, fetch them, produce each wheel, place them all or none;
- ``assemble``: what goes into one variant's wheel (a ``WheelJob`` and its members);
- ``produce``: one wheel written, tagged honestly and checked, in a worker thread;
- ``output``: the output folder, checked before any download and written at once.

Above it sit only ``serve`` and the CLI; below it ``checks``, ``sources``, ``wheel`` and
``kernel``.
"""
