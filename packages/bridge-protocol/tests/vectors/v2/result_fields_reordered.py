# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = False
MESSAGE = Result(execution_id='x-3', status='ok', value='2', error=None)
