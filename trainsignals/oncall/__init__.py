"""oncall"""
