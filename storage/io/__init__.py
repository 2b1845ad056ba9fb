"""The bottom of storage: how bytes are read and written (the filesystem seam, :mod:`.fs`)."""
