# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Result(execution_id='x-1', status='ok', value='1.4142135623730951', error=None)
