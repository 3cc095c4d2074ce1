"""rsio"""
