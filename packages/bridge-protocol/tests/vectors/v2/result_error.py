# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Result(execution_id='x-1', status='error', value=None, error=ErrorInfo(type='ZeroDivisionError', message='division by zero', traceback='  File "<cell>", line 1, in <module>\nZeroDivisionError: division by zero\n'))
