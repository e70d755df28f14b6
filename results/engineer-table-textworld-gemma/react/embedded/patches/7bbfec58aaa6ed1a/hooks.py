def take_coin(ctx, actions_list):
    coin_taken = False
    for action_id, action in actions_list:
        if action_id == 1:
            return action
    if action_id == 2:
        return action_id - 1, action_id - 1
    return "no_reward"

def take_coin_by_id(ctx, actions_list):
    coin_taken = False
    for action_id, action in actions_list:
        if actions_list[action_id][0] == 1 and actions_list[action_id][2] == 0 and actions_list[action_id][1] == 1:
            coin_taken = True
            actions_list[action_id][0] = actions_list[action_id][2] = 1
        actions_list[action_id][0] = actions_list[action_id][1] = actions_list[action_id][2] = 0
    return actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[actions_list[buttons_api_recipes][await Minecraft:supp::supp::supp::supp:supp::supp::supp:supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::anti_supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp:supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp::supp
