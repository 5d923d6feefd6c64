# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Snapshot(snapshot_id='s-2', data=b'', last=True, unsaved=(), error='fork failed: EAGAIN')
