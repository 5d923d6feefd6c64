# Golden vector of protocol version 1. Never edit: see make_vectors.py.
ENCODER_OUTPUT = False
MESSAGE = Shutdown(reason='')
