import queue

class GameCoinCollector:
    def __init__(self, coin_collector_role, level):
        self.bin_pay = 0
        self.coin_collector_role = coin_collector_role
        self.coin_collector_role.master.coin_collector = coin_collector_role
        self.coin_collector_role.aggregate_rates = self.coin_collector_role.aggregate_rates + 1.0
        self.coin_collector_role.balance_factor = 4.0
        self.coin_collector_role.enable_reparation_rates = 0.5
        self.coin_collector_role.enable_set_transactional_access = False
        self.coin_collector_role.allow_blocked_pipelines = 1.0
        self.coin_collector_role.reset_options_pool = 0.0
        self.coin_collector_role.reclaim_drop = False

        self.coin_collector_role.reclaim_pipelines = False
        self.coin_collector_role.reclaim_pipelines_to_drop = True
        self.coin_collector_role.reclaim_pipelines_to_drop_before = True
        self.coin_collector_role.reclaim_pipelines_to_drop_before = True
        self.coin_collector_role.reclaim_pipelines_to_drop_after = True
        self.coin_collector_role.reclaim_pipelines_to_drop_after = True
        self.coin_collector_role.reclaim_pipelines_to_drop_after_reclamation_pipe_to_drop_after = True
        self.coin_collector_role.reclaim_pipelines_to_drop_after_reclaim_piped_pipEQ_pipEQ = False

        queue.Queue(
            self.coin_collector_role.bin_pay, upsubstack=True, queue_out_buffer=True, min_queue_size=128, max_queue_size=8,
            max_queue_buffer_size=128, error_buffer=True, max_queue_buffer_size=128
