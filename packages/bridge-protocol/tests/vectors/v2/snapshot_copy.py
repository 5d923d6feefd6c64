# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = SnapshotCopy(snapshot_id='s-3', base='s-2', offset=4096, length=24000000)
