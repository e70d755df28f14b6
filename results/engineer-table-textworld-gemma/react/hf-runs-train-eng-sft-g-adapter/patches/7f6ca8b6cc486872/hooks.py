def take_coin():
    """

    Args:
    - ctx: a that you created in action, which is the first observation

    Returns:
    - num-observation: a list of seen coins 
    """
    count = 0
    for observation in ctx.observation.candidates:
        if observation['type'] == 'coin':
            drop_coins()
            count += 1
    return count

def take_coin(m):
    """

    Args:
    - ctx: a that you created in action, which is the first observation

    Returns:
    - num-observation: the number of coins taken by the coin collector. If all the coins taken are special, it's success.
    """
    count = 0
    for coin in ctx.coin_collector.coins:
        if coin['type'] == 'coin':
            drop_coins()
            count += 1
    return count
