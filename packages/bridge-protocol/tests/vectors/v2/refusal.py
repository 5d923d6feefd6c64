# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Refusal(code=103, message='the sandbox speaks protocol versions [7], the host speaks [1]', supported=(1,))
