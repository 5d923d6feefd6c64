# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Execute(execution_id='x-1', code='import math\nmath.sqrt(2)\n', repr_limit=10000)
