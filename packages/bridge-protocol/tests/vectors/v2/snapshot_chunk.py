# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Snapshot(snapshot_id='s-1', data=b'MCPSNAP1\x00\x01', last=False, unsaved=(), error='')
