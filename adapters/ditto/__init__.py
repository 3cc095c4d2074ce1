"""ditto"""
