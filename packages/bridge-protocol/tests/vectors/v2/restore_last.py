# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Restore(restore_id='r-1', data=b'MCPSNAP1', last=True)
