"""A trading bot on reactor: concurrent analysis, a joined decision, review, execution.

Run it with ``make demo`` or ``python -m examples.trading_bot``.
"""
