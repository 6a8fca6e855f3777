"""Reading inputs and writing outputs: the edges of the pipeline, where all I/O lives."""
