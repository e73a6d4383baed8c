"""testkit"""
