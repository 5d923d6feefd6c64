# Golden vector of protocol version 2. Never edit: see make_vectors.py.
ENCODER_OUTPUT = True
MESSAGE = Output(execution_id='x-1', stream='stderr', text='héllo → 世界 🐍\r\n')
