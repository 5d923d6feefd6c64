# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Call(call_id=1, execution_id='x-1', server='filesystem', tool='read_file', arguments={'path': '/data/sales.csv', 'limits': [0, -1, 18446744073709551615, -18446744073709551616], 'ratio': 0.5, 'flags': {'follow': True, 'hidden': False, 'encoding': None}, 'raw': b'\x00\xff'})
