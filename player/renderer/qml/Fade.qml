// A layer's fade: opacity animated on the render thread (no frame read back, no CPU painting).
// Python (stage.py) finds it by its objectName and calls play(); finished() says it is over.
import QtQuick

OpacityAnimator {
    objectName: "fade"
    easing.type: Easing.InOutQuad

    function play(begin: real, end: real, ms: int) {
        stop()
        from = begin
        to = end
        duration = ms
        start()
    }
}
