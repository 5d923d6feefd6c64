# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = False
MESSAGE = Execute(execution_id='x-3', code='1 + 1', repr_limit=10000)
