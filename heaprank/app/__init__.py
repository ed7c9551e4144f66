"""The command line (``heaprank ...``), the Lisbon demo and the plots."""
