# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Reply(call_id=2, value=None, fault=Fault(code=201, message="unknown tool 'nope' on server 'time'", data={'suggestions': ['now', 'convert_time']}))
