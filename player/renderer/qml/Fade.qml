// A layer's fade: opacity animated on the render thread (no frame read back, no CPU painting).
// Each layer names it as its `fade`; Python (stage.py) calls play(); finished() says it is over.
import QtQuick

OpacityAnimator {
    easing.type: Easing.InOutQuad

    function play(begin: real, end: real, ms: int) {
        stop()
        from = begin
        to = end
        duration = ms
        start()
    }
}
