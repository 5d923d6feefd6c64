# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Progress(execution_id='x-1', progress=3.0, total=10.0, message='step 3')
