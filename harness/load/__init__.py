"""Loading a solution: its files (one walk, one bounded read, the content hash), and the loader and builder."""
