import mocha as mob

def act(ctx):
    ctx_script = "**test.py**"
    tokens = [f"""
          import interactive
    """
    assert False
    return f"""
          import interactive
    """

    def hook_func(ctx):
        return """
          x = f"""
        return "Im launching a hook that whos function is 0.0.0.0.0.0.0.0.0.0.0"
        return "do-not-use"""
        return f"""
          x = output[0]
          x = f"""
          return x + 1
        raise"""
        return f"""
          x = x + 1
          return None
        def patch(ctx):
            return __.create_mock(moco(ctx_script, 2))
        """
        return f"""
          x = 1
      """
        return f"""
          x = 1
        def on_init(self, ctx):
            return self

        def callback(self, state, *args):
            return state
        def pre_decision(self, ctx):
            return {'on_init': self, 'on_decision' : self.determine_action}
        def post_decision(self, ctx):
            return {
                'on_decision': self.determine_action
            }
        def pre_action(self):
            return {
                'on_action': self.determine_action
            }
        def post_action(self):
            return {
                'on_action': self.determine_action
            }
        def on_init(self, ctx):
            return self

        def on_decision(self, ctx):
            return {"on_action": self.determine_action}
        def on_decision_action(cls, act):
            return {
                "on_action": self.determine_action
            }
        def on_reset(self):
            return "reset"
        def on_selection_selection(self, ctx):
            return {
                "on_selection_selection": self.selection_selection_hole
            }
        def on_selection_hole(self, ctx):
            return {
                "on_selection_hole": self.selection_selection_hole
            }
        def on_selection_selection_hole(self):
            return {
                "on_selection_selection_hole": self.selection_selection_selection_hole
            }
