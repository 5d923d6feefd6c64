# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Execute(execution_id='x-2', code="'a' * 100", repr_limit=20)
