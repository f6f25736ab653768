"""An example commopt pass plug-in."""
