# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Call(call_id=2, execution_id='x-1', server='time', tool='now', arguments={})
