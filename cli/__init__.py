"""The ``commopt`` command line: a thin layer of click commands over the library."""
