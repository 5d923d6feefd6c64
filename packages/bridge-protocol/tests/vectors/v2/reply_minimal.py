# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = False
MESSAGE = Reply(call_id=9, value=None, fault=None)
