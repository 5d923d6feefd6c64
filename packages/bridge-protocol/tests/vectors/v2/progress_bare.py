# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Progress(execution_id='x-1', progress=0.25, total=None, message=None)
