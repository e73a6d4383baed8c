"""runbooks"""
