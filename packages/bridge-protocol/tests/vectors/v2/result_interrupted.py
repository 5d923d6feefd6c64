# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Result(execution_id='x-1', status='interrupted', value=None, error=ErrorInfo(type='KeyboardInterrupt', message='', traceback=''))
