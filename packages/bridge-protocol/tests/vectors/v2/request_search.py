# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Request(call_id=3, execution_id='x-1', method='search_tool_docs', params={'query': 'list files', 'limit': 5})
