(module)
