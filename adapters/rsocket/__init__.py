"""rsocket"""
