"""What a machine holds: shared memory, the names of a partition's arrays in it, and the local operations on them (shared by the server and co-located trainers)."""
