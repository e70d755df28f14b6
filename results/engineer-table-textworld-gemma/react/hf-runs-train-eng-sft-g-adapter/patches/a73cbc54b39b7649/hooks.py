from jitlab import lex_, modules
from jitlab.plugins.blocks import InputHandlerFactory
from jitlab.plugins.blocks import Hooks
from jitlab.plugins.js_lib import JTxPlugin
from jitlab.plugins.js_lib.modules import MasterLoopMatchingMixin
import jitlab.logging
from jitlab.handlers.js_lib.modules import CookieHandlerMixin
from jitlab.handlers.js_lib.utils import nameddicts
import jvm_changelog_internal

__future__ = jvm_changelog_internal.__name__
@jitlab.handlers.js_lib.utils
class HooksMixin(mymc_changelog_internal):
    def __init__(self, module):
        super(
            modules.Hooks,
            self,
            MULTIPLY_2(mymc_changelog_internal),
        )
        super(
            JamieMason.module_inspection.JMasonDump,
            super(mymc_changelog_internal),
        )
        super(
            JamieMason.module_inspection.JMasonDump,
            JamieMasonDump,
            {
                'self': J#_ImmutableItem,
            }
        )

    def add_wrapper(self, *args, **kwargs):
        super(
            JamieMason.module_inspection.MixedImmutableItem,
            JamieMasonDump,
            JamieMasonDump,
        )
        super(
            JamieMason.module_inspection.MixedImmutableItem,
            JamieMasonDump,
        )
        super(
            JamieMason.module_inspection.[jvm_changelog_internal.MixedItemAttribute]()
        )
        super(
            JamieMason.module_inspection.MixedItemAttribute,
            JamieMasonDump
        )

    def add_to_list(self, *args, **kwargs):
        super(
            JamieMason.module_inspection.MixedItem,
            JamieMasonDump,
            JamieMasonDump,
        )
        super(
            JamieMason.module_inspection.MixedItem,
            JamieMasonDump,
        )
        super(
            JamieMason.module_inspection.M
