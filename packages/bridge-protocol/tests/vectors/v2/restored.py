# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Restored(restore_id='r-1', error='')
