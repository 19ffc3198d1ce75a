"""The single decision point: may this read, disclosure or action happen?"""
