# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Output(execution_id='x-1', stream='stdout', text='line 1\n\n  indented\n')
