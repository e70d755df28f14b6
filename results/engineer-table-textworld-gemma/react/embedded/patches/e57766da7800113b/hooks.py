# This is a custom function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [h for h in hooks if hasattr(h, attribute)]

# This is a function that takes a list of hooks and returns a list of hooks that
# have a certain attribute.
def get_hooks_by_attribute(hooks, attribute):
    return [
