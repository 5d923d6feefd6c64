# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Reply(call_id=1, value={'content': [{'type': 'text', 'text': 'region,total\nnorth,12\n'}], 'structuredContent': {'rows': 1}, 'isError': False}, fault=None)
